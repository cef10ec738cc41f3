package receiver

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"
)

// Simulation makes the Handler misbehave on purpose so a sender's retry
// and timeout handling can be tested. The zero value simulates nothing.
type Simulation struct {
	// Status answers every accepted request with this code.
	Status int
	// Respond answers the n-th accepted request with Respond[n]; once the
	// sequence runs out its last value repeats (500,500,200: two
	// failures, then success). Exclusive with Status.
	Respond []int
	// Delay holds each answer back this long (6s exceeds the 5 s deadline
	// of spec 8).
	Delay time.Duration
	// FailRate is the probability in [0,1] that a request is answered
	// FailStatus instead.
	FailRate float64
	// FailStatus is the code for FailRate failures (default 500).
	FailStatus int
	// Rand returns a number in [0,1); default math/rand/v2. Tests inject
	// a fixed sequence.
	Rand func() float64
}

type simulator struct {
	Simulation
	n atomic.Int64 // requests that reached the simulation
}

func newSimulator(s Simulation) (*simulator, error) {
	if s.Status != 0 && len(s.Respond) > 0 {
		return nil, &configError{"Simulate", "Status and Respond are exclusive"}
	}
	for _, c := range append([]int{s.Status, s.FailStatus}, s.Respond...) {
		if c != 0 && (c < 100 || c > 999) {
			return nil, &configError{"Simulate", fmt.Sprintf("status %d out of range 100-999", c)}
		}
	}
	if s.FailRate < 0 || s.FailRate > 1 {
		return nil, &configError{"Simulate.FailRate", "must be within 0 and 1"}
	}
	if s.Delay < 0 {
		return nil, &configError{"Simulate.Delay", "must not be negative"}
	}
	if s.FailStatus == 0 {
		s.FailStatus = http.StatusInternalServerError
	}
	if s.Rand == nil {
		s.Rand = rand.Float64
	}
	return &simulator{Simulation: s}, nil
}

func (s *simulator) setsStatus() bool { return s.Status != 0 || len(s.Respond) > 0 }

// next returns the status to answer (0: the normal answer) and the delay.
func (s *simulator) next() (int, time.Duration) {
	n := s.n.Add(1) - 1
	if s.FailRate > 0 && s.Rand() < s.FailRate {
		return s.FailStatus, s.Delay
	}
	switch {
	case len(s.Respond) > 0:
		return s.Respond[min(n, int64(len(s.Respond)-1))], s.Delay
	case s.Status != 0:
		return s.Status, s.Delay
	}
	return 0, s.Delay
}
