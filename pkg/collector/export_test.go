package collector

// BodyBytes is what the requests in flight hold of h's body budget.
func BodyBytes(h *Handler) int64 { return h.budget.used.Load() }

const (
	BodyStart     = bodyStart
	GzipState     = gzipState
	MinBodyBudget = minBodyBudget
)
