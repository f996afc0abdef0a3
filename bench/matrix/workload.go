package matrix

import "fmt"

// opKind selects what a worker does per key.
type opKind uint8

const (
	opUpdate opKind = iota
	opQuery
	opUpdateAndQuery
	opTryUpdate
	opMix90
)

// workload is one row family of the matrix: the operation, the value every
// key is pre-filled with, the delta of each write and the TryUpdate limit.
type workload struct {
	name  string
	op    opKind
	fill  float64 // pre-fill delta per key of the universe
	delta float64 // delta of every Update, UpdateAndQuery and TryUpdate
	limit float64 // TryUpdate limit (opTryUpdate only)
}

// workloadByName returns the named workload.
func workloadByName(name string) (workload, error) {
	switch name {
	case WorkUpdate:
		return workload{name, opUpdate, 1, 1, 0}, nil
	case WorkUpdateSaturated:
		return workload{name, opUpdate, sketchHi, sketchHi, 0}, nil
	case WorkQuery:
		return workload{name, opQuery, 1, 1, 0}, nil
	case WorkUpdateAndQuery:
		return workload{name, opUpdateAndQuery, 1, 1, 0}, nil
	case WorkTryUpdateAdmit:
		return workload{name, opTryUpdate, 1, 1, admitLimit}, nil
	case WorkTryUpdateDenied:
		return workload{name, opTryUpdate, denyFill, 1, denyLimit}, nil
	case WorkMix90:
		return workload{name, opMix90, 1, 1, 0}, nil
	}
	return workload{}, fmt.Errorf("matrix: unknown workload %q", name)
}

// isTry reports whether the workload counts admissions.
func (w workload) isTry() bool { return w.op == opTryUpdate }
