package embedded

import (
	"context"
	"os"

	"github.com/listgate/listgate/store"
)

// BlockBytesRead is the bytes of the blocks the store's scans read.
func (s *Store) BlockBytesRead() int64 { return s.blockBytes.Load() }

// Compact writes every key to tables of the last level, whose blocks
// scans then read.
func (s *Store) Compact() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}

// RunAs makes the process seem to run as user uid to the backup's check
// of the store's user, until restore. Tests that call it must not run in
// parallel with backups.
func RunAs(uid int) (restore func()) {
	geteuid = func() int { return uid }
	return func() { geteuid = os.Geteuid }
}

// TakeTurns takes every turn of the long scans, until release.
func (s *Store) TakeTurns() (release func()) { return s.turns.Take() }

// PutFeatureRecord writes a feature's stored record as given, JSON, as an
// earlier release wrote it.
func (s *Store) PutFeatureRecord(entityType, name, version string, record []byte) error {
	return s.db.Set(featureKey(entityType, name, version), record, nil)
}

// GiveUpANumber numbers a record and gives the number up, as an add whose
// commit fails does.
func (s *Store) GiveUpANumber() error {
	n, err := s.give(s.now())
	if err != nil {
		return err
	}
	s.feed.done(n)
	return nil
}

// RecordNumber is the number of the record of a position of this feed.
func (s *Store) RecordNumber(p store.Position) (uint64, bool) { return s.feed.seqOf(p.Record) }

// SweepFeed sweeps the records past the retention, as the sweep loop does.
func (s *Store) SweepFeed() error { return s.sweepFeed() }

// OnTargetChecked runs f between the check of a backup's folder and the
// write, until restore. Tests that call it must not run in parallel with
// backups.
func OnTargetChecked(f func()) (restore func()) {
	targetChecked = f
	return func() { targetChecked = func() {} }
}
