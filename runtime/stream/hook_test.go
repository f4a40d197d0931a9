package stream

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestControlsHook checks that the hook sees every accepted change before
// it applies, that its error keeps the old controls, that invalid controls
// never reach it, and that the steps get what the hook accepted.
func TestControlsHook(t *testing.T) {
	var seen []Controls
	refuse := false
	rec := &recorder{}
	s, err := New(rtSpec(8, 1, 1, "forward", "left"), rec.step, WithPacing(false), WithMaxChunks(3),
		WithControlsHook(func(c Controls) error {
			if refuse {
				return errors.New("remote refused")
			}
			seen = append(seen, c)
			return nil
		}),
		WithControls(Controls{"forward": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Paced() || s.MaxChunks() != 3 {
		t.Errorf("Paced %v MaxChunks %d, want false 3", s.Paced(), s.MaxChunks())
	}
	if err := s.SetControls(Controls{"jump": 1}); err == nil || !strings.Contains(err.Error(), `unknown control "jump"`) {
		t.Errorf("unknown control: %v", err)
	}
	refuse = true
	if err := s.SetControls(Controls{"left": 1}); err == nil || !strings.Contains(err.Error(), "remote refused") {
		t.Errorf("refused: %v", err)
	}
	if got := s.Controls(); !reflect.DeepEqual(got, Controls{"forward": 1}) {
		t.Errorf("controls after a refused change: %v", got)
	}
	refuse = false
	if err := s.SetControls(Controls{"left": 0.5}); err != nil {
		t.Fatal(err)
	}
	if want := []Controls{{"forward": 1}, {"left": 0.5}}; !reflect.DeepEqual(seen, want) {
		t.Errorf("hook saw %v, want %v", seen, want)
	}
	if _, err := collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.requests(); len(reqs) != 3 || !reflect.DeepEqual(reqs[0].Controls, Controls{"left": 0.5}) {
		t.Errorf("requests %v", reqs)
	}
	d, _ := New(nil, rec.step)
	if !d.Paced() || d.MaxChunks() != 0 {
		t.Errorf("defaults: Paced %v MaxChunks %d", d.Paced(), d.MaxChunks())
	}
}
