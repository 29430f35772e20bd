package tptrain

// Checkpoints and exact resume: the header section "Checkpoints and resume"
// (docs/checkpoints.md).

/*
#include <stdlib.h>
#include <tptrain.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// ModelSaverOptions are the options of ModelSaver
// (tpt_model_saver_options). The zero value is tensorpack's defaults: save
// after every epoch into the log directory, keep the newest 10, and keep one
// per half hour beyond them.
type ModelSaverOptions struct {
	// MaxToKeep is how many of the newest checkpoints stay; 0 means 10.
	// KeepAll keeps every one.
	MaxToKeep int
	KeepAll   bool
	// KeepEveryNHours: one checkpoint per this many hours is never deleted;
	// 0 means 0.5, and NoHourlyKeep none.
	KeepEveryNHours float64
	NoHourlyKeep    bool
	// EveryKSteps also saves every k global steps (0: not step-based).
	EveryKSteps int64
	// EveryKEpochs saves after every k-th epoch; 0 means 1. NoEpochSaves
	// turns epoch saves off (then EveryKSteps must be set).
	EveryKEpochs int64
	NoEpochSaves bool
	// Dir is the checkpoint directory; "" means the trainer's log directory.
	Dir string
}

// ModelSaver makes tensorpack's ModelSaver (tpt_callback_model_saver): a
// chief-only callback that writes model-<global_step> and the index file
// "checkpoint" atomically, deleting the oldest beyond MaxToKeep. An IO error
// while saving is logged and training goes on.
func ModelSaver(o ModelSaverOptions) (*Callback, error) {
	c := defaultModelSaverOptions()
	c.every_k_steps = C.int64_t(o.EveryKSteps)
	if o.MaxToKeep != 0 {
		if o.MaxToKeep < 0 || o.MaxToKeep > 1<<30 {
			return nil, &Error{Code: CodeInvalidArgument, Message: "ModelSaverOptions.MaxToKeep must be >= 0 (use KeepAll to keep all)"}
		}
		c.max_to_keep = C.int32_t(o.MaxToKeep)
	}
	if o.KeepAll {
		c.max_to_keep = 0
	}
	if o.KeepEveryNHours != 0 {
		c.keep_every_n_hours = C.double(o.KeepEveryNHours)
	}
	if o.NoHourlyKeep {
		c.keep_every_n_hours = 0
	}
	if o.EveryKEpochs != 0 {
		c.every_k_epochs = C.int64_t(o.EveryKEpochs)
	}
	if o.NoEpochSaves {
		c.every_k_epochs = 0
	}
	if o.Dir != "" {
		c.dir = C.CString(o.Dir)
		defer C.free(unsafe.Pointer(c.dir))
	}
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_model_saver(&out, &c)); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "ModelSaver"), nil
}

// BestSaverOptions are the options of MinSaver and MaxSaver; the zero value
// is the defaults.
type BestSaverOptions struct {
	// Filename of the copy; "" means min-<stat> / max-<stat>.
	Filename string
	// Dir of the checkpoints; "" means the log directory.
	Dir string
}

// MinSaver makes tensorpack's MinSaver (tpt_callback_min_saver): when the
// latest value of the scalar stat is the lowest so far, the newest
// checkpoint, which must be of that step, is copied to min-<stat>. Add it
// after the ModelSaver and after the callback that puts stat.
func MinSaver(stat string, o BestSaverOptions) (*Callback, error) { return bestSaver(stat, o, false) }

// MaxSaver is MinSaver for the highest value, copied to max-<stat>
// (tpt_callback_max_saver).
func MaxSaver(stat string, o BestSaverOptions) (*Callback, error) { return bestSaver(stat, o, true) }

func bestSaver(stat string, o BestSaverOptions, maximize bool) (*Callback, error) {
	cstat := C.CString(stat)
	defer C.free(unsafe.Pointer(cstat))
	var file, dir *C.char
	if o.Filename != "" {
		file = C.CString(o.Filename)
		defer C.free(unsafe.Pointer(file))
	}
	if o.Dir != "" {
		dir = C.CString(o.Dir)
		defer C.free(unsafe.Pointer(dir))
	}
	var out *C.tpt_callback
	var st *C.tpt_status
	name := "MinSaver"
	if maximize {
		name = "MaxSaver"
		st = C.tpt_callback_max_saver(&out, cstat, file, dir)
	} else {
		st = C.tpt_callback_min_saver(&out, cstat, file, dir)
	}
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newCallback(out, nil, name), nil
}

// Resume makes the run go on exactly from the checkpoint at path, a
// checkpoint file or a directory whose index names its latest
// (tpt_trainer_resume): variables, optimizer state, counters, random state,
// the input's position and callbacks' state. Before Run. The file is read
// and checked now; whether it fits the model is checked when Run starts,
// which then fails naming the variables.
func (t *Trainer) Resume(path string) error {
	ptr, err := t.lock("Resume")
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	st := C.tpt_trainer_resume(ptr, cpath)
	runtime.KeepAlive(t)
	return statusError(st)
}

// SaveCheckpoint writes the trainer's whole state to path now, atomically
// (tpt_trainer_save_checkpoint): from a callback between steps
// (EventTriggerStep, the epoch events, before or after training); inside
// run_step it is an *Error of CodeState.
func (c *Context) SaveCheckpoint(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	return statusError(C.tpt_trainer_save_checkpoint(c.ptr, cpath))
}

// RestoreOptions say how Model.Restore matches variables
// (tpt_restore_options). The zero value: every variable must be in the file
// with its shape, and tensors of the file that match no variable are
// skipped.
type RestoreOptions struct {
	// IgnoreMissing keeps the values of variables the file lacks.
	IgnoreMissing bool
	// StrictUnexpected makes tensors of the file that match no variable an
	// error.
	StrictUnexpected bool
	// IgnoreShapeMismatch skips variables whose shapes differ.
	IgnoreShapeMismatch bool
	// Prefix is put in front of every variable's name to find it in the file.
	Prefix string
	// NameMap finds a variable (the key) under another name in the file.
	NameMap map[string]string
}

// Restore copies tensors into the built model's variables by name
// (tpt_model_restore, tensorpack's SaverRestore) from a tptrain checkpoint
// (or a directory's latest), a state_dict saved by python3-torch (dotted
// names such as "fc.weight" are read as "fc/weight") or a TorchScript
// module. All or nothing: the error lists the missing and mismatched
// variables, and no variable changes. It returns how many variables were
// restored.
func (m *Model) Restore(path string, o RestoreOptions) (int, error) {
	ptr, err := m.rlock("Restore")
	if err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	cstr := func(s string) *C.char {
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	c := defaultRestoreOptions()
	c.ignore_missing = cBool(o.IgnoreMissing)
	c.ignore_unexpected = cBool(!o.StrictUnexpected)
	c.ignore_shape_mismatch = cBool(o.IgnoreShapeMismatch)
	if o.Prefix != "" {
		c.prefix = cstr(o.Prefix)
	}
	if len(o.NameMap) > 0 {
		// The array of C string pointers lives in C memory: no Go pointer in C.
		mem := C.malloc(C.size_t(2*len(o.NameMap)) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
		frees = append(frees, mem)
		arr := unsafe.Slice((**C.char)(mem), 2*len(o.NameMap))
		i := 0
		for k, v := range o.NameMap {
			arr[2*i], arr[2*i+1] = cstr(k), cstr(v)
			i++
		}
		c.name_map = &arr[0]
		c.n_name_map = C.size_t(len(o.NameMap))
	}
	cpath := cstr(path)
	var n C.size_t
	st := C.tpt_model_restore(&n, ptr, cpath, &c)
	runtime.KeepAlive(m)
	if err := m.st.result(st); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SetCheckpointReadLimit sets the most a checkpoint, torch.save file or
// TorchScript module may make the reader allocate beyond its own size
// (tpt_set_checkpoint_read_limit): entries inflated past their compressed
// size, tensors wider than their records, the reader's tables. More is
// refused with an error naming the file. Default 256 MiB, at most 2^62;
// process-wide. Reading never trusts the file: see docs/checkpoints.md,
// "Checkpoints from others".
func SetCheckpointReadLimit(bytes uint64) error {
	return statusError(C.tpt_set_checkpoint_read_limit(C.uint64_t(bytes)))
}

// CallbackStater is the state of a callback of its own that checkpoints
// keep (a schedule's position, a best value): SaveState when a checkpoint
// is taken, RestoreState with those bytes when a resumed run starts (after
// SETUP, before BEFORE_TRAIN). See NewStatefulCallback.
type CallbackStater interface {
	SaveState() ([]byte, error)
	RestoreState(state []byte) error
}

// SchedulePoint is one point of a hyper-parameter schedule: from epoch (or
// global step) At on, Value (tpt_schedule_point).
type SchedulePoint struct {
	At    int64
	Value float64
}

// ScheduleOptions are the options of ScheduledHyperParam; the zero value is
// tensorpack's defaults (epoch-based, no interpolation, set at the
// beginning).
type ScheduleOptions struct {
	Linear         bool // interpolate between points at every trigger
	StepBased      bool // points are global steps, checked at every step
	NotAtBeginning bool // do not set the schedule's value in BEFORE_TRAIN
}

// ScheduledHyperParam makes tensorpack's ScheduledHyperParamSetter
// (tpt_callback_scheduled_hyperparam): it sets the optimizer's
// hyper-parameter param after epoch At completes (0: before the first
// epoch), or at global step At with StepBased; in BEFORE_TRAIN it sets what
// the schedule says for the epochs completed, so a resumed run follows it.
func ScheduledHyperParam(opt *Optimizer, param string, schedule []SchedulePoint, o ScheduleOptions) (*Callback, error) {
	ptr, err := opt.lock("ScheduledHyperParam")
	if err != nil {
		return nil, err
	}
	defer opt.mu.Unlock()
	if len(schedule) == 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "ScheduledHyperParam: the schedule is empty"}
	}
	// The points in C memory: no Go pointer is passed to C inside another.
	mem := C.malloc(C.size_t(len(schedule)) * C.size_t(unsafe.Sizeof(C.tpt_schedule_point{})))
	defer C.free(mem)
	pts := unsafe.Slice((*C.tpt_schedule_point)(mem), len(schedule))
	for i, p := range schedule {
		pts[i] = C.tpt_schedule_point{at: C.int64_t(p.At), value: C.double(p.Value)}
	}
	var flags C.uint32_t
	if o.Linear {
		flags |= C.TPT_SCHEDULE_LINEAR
	}
	if o.StepBased {
		flags |= C.TPT_SCHEDULE_STEP_BASED
	}
	if o.NotAtBeginning {
		flags |= C.TPT_SCHEDULE_NOT_AT_BEGINNING
	}
	cparam := C.CString(param)
	defer C.free(unsafe.Pointer(cparam))
	var out *C.tpt_callback
	st := C.tpt_callback_scheduled_hyperparam(&out, ptr, cparam, &pts[0], C.size_t(len(schedule)), flags)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "ScheduledHyperParamSetter("+param+")"), nil
}
