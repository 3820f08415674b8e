package ratelog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestOncePerIntervalPerKind(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for range 5 {
		l.Warn("a", "line a")
		l.Info("b", "line b")
	}
	if n := strings.Count(buf.String(), "line a"); n != 1 {
		t.Errorf("kind a logged %d times, want 1", n)
	}
	if n := strings.Count(buf.String(), "line b"); n != 1 {
		t.Errorf("kind b logged %d times, want 1", n)
	}
	l.interval = 0 // the next line of a kind is due at once
	l.Warn("a", "line a")
	if !strings.Contains(buf.String(), "similar_not_logged=4") {
		t.Errorf("the next line does not count the 4 not logged:\n%s", buf.String())
	}
}

func TestKindsBounded(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for i := range 3 * maxKinds {
		l.Info(fmt.Sprint(i), "distinct")
	}
	if n := len(l.mu.kinds); n > maxKinds {
		t.Errorf("%d kinds kept, bound %d", n, maxKinds)
	}
}
