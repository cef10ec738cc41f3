package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestDuePlans: what reads pending deliveries reads deliveries_due, the
// one index of them (source, destination, next_attempt_at), and never
// the table or a sort of its rows: a destination's lease, from the head
// and on from a floor (with a deletion's condition, held), its cancel,
// the destinations of a source, Release (a seek per destination, then
// the entries scheduled after now) and Stats (every pending entry, in the
// index's order of sources; it sorts only its one row per source).
func TestDuePlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "evfwd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	same, after := dueSQL(` AND NOT (m.user_id = ? AND d.message <= ? AND m.type != 'delete')`)
	for _, tt := range []struct {
		name, q string
		args    []any
		want    []string // in the plan, each
	}{
		{"first free", firstFreeSQL, []any{"web", "hooks", 0},
			[]string{"SEARCH d USING COVERING INDEX deliveries_due (source=? AND destination=? AND next_attempt_at<?)"}},
		{"due at the floor's ms", same, []any{"web", "hooks", 0, 0, "u", 0},
			[]string{"SEARCH d USING INDEX deliveries_due (source=? AND destination=? AND next_attempt_at=? AND rowid>?)"}},
		{"due after it", after, []any{"web", "hooks", 0, 0, "u", 0},
			[]string{"SEARCH d USING INDEX deliveries_due (source=? AND destination=? AND next_attempt_at>? AND next_attempt_at<?)"}},
		{"cancel", cancelSQL, []any{"removed", 0, "web", "hooks", 1000},
			[]string{"SEARCH deliveries USING COVERING INDEX deliveries_due (source=? AND destination=?)"}},
		{"destinations", destinationsSQL, []any{"web"},
			[]string{"SEARCH deliveries USING COVERING INDEX deliveries_due (source=?)",
				"SEARCH deliveries USING COVERING INDEX deliveries_due (source=? AND destination>?)"}},
		{"release", releaseSQL(`substr(last_error, 1, length(?4)) = ?4`), []any{0, "web", 1000, "breaker open"},
			[]string{"SEARCH deliveries USING INDEX deliveries_due (source=? AND destination=? AND next_attempt_at>?)",
				"SEARCH deliveries USING COVERING INDEX deliveries_due (source=? AND destination>?)"}},
		{"stats", statsSQL, nil,
			[]string{"SCAN deliveries USING COVERING INDEX deliveries_due", "SEARCH d USING INTEGER PRIMARY KEY (rowid=?)"}},
	} {
		rows, err := s.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+tt.q, tt.args...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notUsed int
			var line string
			if err := rows.Scan(&id, &parent, &notUsed, &line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: the plan lacks %q:\n%s", tt.name, w, text)
			}
		}
		for _, line := range plan {
			// A scan of the table, or of an index other than the due
			// one; a sort other than Stats' of its sources.
			if strings.HasPrefix(line, "SCAN deliveries") && !strings.Contains(line, "deliveries_due") ||
				strings.HasPrefix(line, "SCAN d ") || strings.HasPrefix(line, "SCAN m") ||
				strings.Contains(line, "TEMP B-TREE") && !(tt.name == "stats" && line == "USE TEMP B-TREE FOR ORDER BY") {
				t.Errorf("%s: %q in the plan:\n%s", tt.name, line, text)
			}
		}
	}
}
