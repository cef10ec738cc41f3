package collector

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"time"
)

// MaskWriteKey shows the first four and last two characters of a write key
// of 16 or more (wk_l…23), so that keys can be told apart while at least
// ten stay hidden; a shorter key is "****", and "" stays "".
func MaskWriteKey(key string) string {
	r := []rune(key)
	switch {
	case key == "":
		return ""
	case len(r) < 16:
		return "****"
	}
	return string(r[:4]) + "…" + string(r[len(r)-2:])
}

// unknownKeyEvery is how often one unknown write key is reported: a page
// left with an old key sends it on every view. Keys are remembered by
// their SHA-256: a key is anyone's input, its bytes are not kept.
const unknownKeyEvery = time.Minute

// unknownKey reports a write key no source has to OnError (masked, with
// the page's origin and the client's address), at most once a minute per
// key: the 401 or the settings' 404 shows only in the browser's console,
// and a page whose settings failed sends nothing more.
func (h *Handler) unknownKey(r *http.Request, key string, status int) {
	if key == "" || h.cfg.OnError == nil || !h.unknown.due(sha256.Sum256([]byte(key)), h.cfg.Now()) {
		return
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		origin = "none"
	}
	h.onError(status, fmt.Errorf("unknown write key %s from origin %q, client %s (reported once a minute per key)",
		MaskWriteKey(key), origin, ClientAddr(r, h.cfg.TrustedProxies)))
}
