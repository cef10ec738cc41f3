package syncrun

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	p := newPacer(bound{1000, 100, 4000})
	p.took(1000, 4*stepTarget) // slow: toward 250
	if p.size() >= 1000 || p.size() < 100 {
		t.Errorf("after a slow step: %d", p.size())
	}
	for range 20 {
		p.took(p.size(), 8*stepTarget)
	}
	if p.size() != 100 {
		t.Errorf("after slow steps: %d, want the least, 100", p.size())
	}
	p.took(10, time.Millisecond) // a short last step: no change
	if p.size() != 100 {
		t.Errorf("after a short step: %d, want 100", p.size())
	}
	for range 20 {
		p.took(p.size(), stepTarget/10)
	}
	if p.size() != 4000 {
		t.Errorf("after quick steps: %d, want the most, 4000", p.size())
	}
	for range 20 {
		p.took(p.size(), time.Duration(p.size())*stepTarget/2000)
	}
	if p.size() < 1800 || p.size() > 2200 {
		t.Errorf("at 2000 rows per stepTarget: %d", p.size())
	}
}
