package snapshot_test

import (
	"io"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// docs/snapshots.md's signature block, checked at compile time.
var (
	_ func(*sketch.Sketch) ([]byte, error)                                                      = (*sketch.Sketch).MarshalBinary
	_ func(*sketch.Sketch, io.Writer) (int64, error)                                            = (*sketch.Sketch).WriteTo
	_ func(*sketch.Sketch, []byte) error                                                        = (*sketch.Sketch).UnmarshalBinary
	_ func(*sketch.Sketch, io.Reader) (int64, error)                                            = (*sketch.Sketch).ReadFrom
	_ func(*sketch.Sketch, *sketch.Sketch, ...time.Duration) error                              = (*sketch.Sketch).Merge
	_ func(*rotator.Rotator) ([]byte, error)                                                    = (*rotator.Rotator).MarshalBinary
	_ func(*rotator.Rotator, io.Writer) (int64, error)                                          = (*rotator.Rotator).WriteTo
	_ func(*rotator.Rotator, []byte) error                                                      = (*rotator.Rotator).UnmarshalBinary
	_ func(*rotator.Rotator, io.Reader) (int64, error)                                          = (*rotator.Rotator).ReadFrom
	_ func(string, time.Duration, snapshot.Source, ...snapshot.Option) (*snapshot.Saver, error) = snapshot.NewSaver
	_ func(*snapshot.Saver) error                                                               = (*snapshot.Saver).Save
	_ func(*snapshot.Saver) error                                                               = (*snapshot.Saver).Close
	_ func(*snapshot.Saver) error                                                               = (*snapshot.Saver).LastError
	_ func(*snapshot.Saver) uint64                                                              = (*snapshot.Saver).Saves
	_ func(func(error)) snapshot.Option                                                         = snapshot.OnError
	_ func(func(error)) snapshot.Option                                                         = snapshot.OnSave
	_ func(string, snapshot.Source) error                                                       = snapshot.WriteFile
	_ func(string, snapshot.Destination) error                                                  = snapshot.Load
	_ snapshot.Source                                                                           = (*sketch.Sketch)(nil)
	_ snapshot.Destination                                                                      = (*rotator.Rotator)(nil)
)

func TestAudit56SnapshotSignatures(t *testing.T) {}
