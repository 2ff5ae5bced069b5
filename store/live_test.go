package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
)

// A subscription waits wait after a feature was made live, and says how
// long is left; one to a feature live since its creation does not wait. A
// resumption after a position recorded before wait after the switch is
// refused POSITION_EXPIRED: adds of then may not have been recorded; so
// is one after a position from before the feature was created (again).
func TestLiveSinceRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const wait = 65 * time.Second
	born := &Feature{EntityType: "user", Name: "f", Live: true, CreatedAt: now.Add(-2 * time.Hour)}
	made := &Feature{EntityType: "user", Name: "f", Live: true, CreatedAt: now.Add(-2 * time.Hour), LiveSince: now.Add(-60 * time.Second)}
	if err := CheckLiveSince(born, now, wait); err != nil {
		t.Fatalf("live since its creation: %v", err)
	}
	err := CheckLiveSince(made, now, wait)
	if !errors.Is(err, errkind.Conflict) || !strings.Contains(err.Error(), "subscribe in 5 s") {
		t.Fatalf("made live 60 s ago, waiting 65: %v", err)
	}
	if err := CheckLiveSince(made, now.Add(5*time.Second), wait); err != nil {
		t.Fatalf("made live 65 s ago, waiting 65: %v", err)
	}
	if err := CheckResume(born, now.Add(-time.Hour), wait); err != nil {
		t.Fatalf("resuming a feature live since its creation: %v", err)
	}
	if err := CheckResume(born, born.CreatedAt.Add(-time.Millisecond), wait); !errors.Is(err, errkind.PositionExpired) || !strings.Contains(err.Error(), "deleted since") {
		t.Fatalf("resuming after a position from before the feature was created (again): %v", err)
	}
	if err := CheckResume(made, made.LiveSince.Add(wait-time.Millisecond), wait); !errors.Is(err, errkind.PositionExpired) {
		t.Fatalf("resuming after a position from before every gateway recorded: %v", err)
	}
	if err := CheckResume(made, made.LiveSince.Add(wait), wait); err != nil {
		t.Fatalf("resuming after a position from once every gateway recorded: %v", err)
	}
}
