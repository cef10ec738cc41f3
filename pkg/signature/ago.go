package signature

import "time"

// Ago says how far from now a moment d before it is, in words a person
// reads at a glance: "3 years ago", "2 days ago", "5 minutes ago", exact
// seconds under a minute ("42 seconds ago"), and "in 3 minutes" for a
// negative d, a moment still to come. Each unit is whole and rounded
// down, as gh does: 47 hours is "1 day", so the words never overstate.
// A month is 30 days and a year 365.
func Ago(d time.Duration) string {
	if d < 0 {
		return "in " + span(-d)
	}
	return span(d) + " ago"
}

// span is d (not negative) in its largest whole unit.
func span(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d < time.Second:
		return "less than a second"
	case d < time.Minute:
		return plural(int64(d/time.Second), "second")
	case d < time.Hour:
		return plural(int64(d/time.Minute), "minute")
	case d < day:
		return plural(int64(d/time.Hour), "hour")
	case d < 30*day:
		return plural(int64(d/day), "day")
	case d < 365*day:
		return plural(int64(d/(30*day)), "month")
	}
	return plural(int64(d/(365*day)), "year")
}
