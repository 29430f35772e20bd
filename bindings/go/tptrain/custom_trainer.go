package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
*/
import "C"

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"
)

// ---- Writing a trainer: train ops and the GAN trainers.

// TrainOp is one optimisation of a model, tensorpack's
// opt.minimize(cost, var_list) (tpt_train_op): a one-element output of the
// tower function, minimised over the trainable variables under a scope by an
// optimizer of its own. Model.AddTrainOp adds one; a run_step of your own
// runs ops by name with Context.RunTrainOps, and the GAN trainers
// (Trainer.SetGAN) are such run_steps. Only Name is required.
type TrainOp struct {
	// Name names the op in Context.RunTrainOps and in checkpoints (which
	// keep each op's optimizer state under it); unique in the model.
	Name string
	// Cost is the output of the tower function (Tower.SetOutput) to
	// minimise, one real number; "" means the tower's cost (Tower.SetCost).
	Cost string
	// Scope selects the trainable variables whose names start with it
	// ("discrim/"); "" means all of them. A scope that matches no variable
	// fails Run, naming the op.
	Scope string
	// Optimizer is the op's own optimizer; the model takes its own
	// reference (the caller still owns it, and may Close it or keep it to
	// change its hyper-parameters). It must be neither the model's nor
	// another op's. nil means a copy of the model's optimizer, with slots of
	// its own, that follows the model's hyper-parameters (a schedule on the
	// model's optimizer moves it too).
	Optimizer *Optimizer
}

// trainOpFieldNames spells the fields of tpt_train_op that the library's
// messages name as TrainOp does.
var trainOpFieldNames = strings.NewReplacer(
	"op->name", "TrainOp.Name",
	"op->cost", "TrainOp.Cost",
	"op->scope", "TrainOp.Scope",
	"op->optimizer", "TrainOp.Optimizer",
	"or NULL (a copy of the model's)", "or nil (a copy of the model's)",
)

// noNUL returns an error naming what when s holds a NUL byte, which would
// end the C string early.
func noNUL(who, what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return &Error{Code: CodeInvalidArgument, Message: who + ": " + what + " is " + strconv.Quote(s) + ": it holds a NUL byte"}
	}
	return nil
}

// runTrainOpsNames spells the C functions that the library's messages about
// running train ops name as this package does.
var runTrainOpsNames = strings.NewReplacer(
	"(tpt_trainer_set_run_step)", "(Trainer.SetRunStep)",
	"(tpt_trainer_set_model)", "(Trainer.SetModel or Trainer.SetGAN)",
	"(tpt_model_add_train_op)", "(Model.AddTrainOp)",
)

// RunTrainOps runs the model's train ops names, in order, as one hooked
// step, tensorpack's hooked_sess.run (tpt_trainer_run_train_ops with
// hooked): BEFORE_RUN of every callback that asked for it, one forward pass
// of the tower function on the input's next batch, every op's gradients
// from that one pass, then each op's update in order, then AFTER_RUN; the
// global step advances by one, and the tower's outputs are published (step
// outputs, and moving summaries that reach the monitors: "g_loss",
// "d_loss").
//
// It returns what HookedStep returns, and run_step should return it as it
// is: nil, a *StopError when a callback or the input asked to stop, or the
// error that failed the run. An error returned by a callback, the tower
// function or a feed function is that very value; a panic in one of them
// comes out of RunTrainOps with its value, as if it had been called
// directly. An unknown op is an *Error of CodeInvalidArgument naming it (and
// the ops the model has); a call outside run_step (SetRunStep, after
// SetModel, SetTowers or SetGAN) one of CodeState.
//
// The simple trainer, the replicated and the parameter-server strategies
// (SetTowers) and distributed jobs run train ops: with towers every tower
// takes its own batch and each op's gradients are averaged over the
// towers. The async strategy runs none: an *Error of CodeUnsupported.
func (c *Context) RunTrainOps(names ...string) error {
	return c.runTrainOps("Context.RunTrainOps", names, true)
}

// RunTrainOpsRaw runs the model's train ops names, in order, as
// RunTrainOps does but without hooks, tensorpack's sess.run: no callback
// runs, the global step stays, and no output is published
// (tpt_trainer_run_train_ops without hooked). It takes a batch from the
// input all the same. Its results are RunTrainOps'.
func (c *Context) RunTrainOpsRaw(names ...string) error {
	return c.runTrainOps("Context.RunTrainOpsRaw", names, false)
}

func (c *Context) runTrainOps(who string, names []string, hooked bool) error {
	if len(names) == 0 {
		return &Error{Code: CodeInvalidArgument, Message: who + ": no train op to run: give their names"}
	}
	for i, n := range names {
		if err := noNUL(who, "names["+strconv.Itoa(i)+"]", n); err != nil {
			return err
		}
	}
	// Go memory holding C pointers only: the library reads them during the
	// call.
	cnames := make([]*C.char, len(names))
	for i, n := range names {
		cnames[i] = C.CString(n)
	}
	defer func() {
		for _, p := range cnames {
			C.free(unsafe.Pointer(p))
		}
	}()
	wasPanicking := c.panicking
	st := C.tpt_trainer_run_train_ops(c.ptr, &cnames[0], C.size_t(len(cnames)), cBool(hooked))
	if c.panicking && !wasPanicking { // a callback's panic: out of here, as HookedStep
		C.tpt_status_free(st)
		v := c.panicValue
		c.unwinding = c.panicWhere
		c.panicking, c.panicValue, c.panicWhere = false, nil, ""
		panic(v)
	}
	if st == nil {
		return nil
	}
	// The tower and feed functions' errors and panics are in their stashes.
	code, msg := Code(C.tpt_status_code(st)), C.GoString(C.tpt_status_message(st))
	for _, s := range c.stashes {
		if err, v, where, panicked, found := s.takeAt(code, msg); found {
			C.tpt_status_free(st)
			if panicked {
				c.unwinding = where
				panic(v)
			}
			return err
		}
	}
	// A callback's error, or a stop, of the hooked run.
	for i := len(c.errs) - 1; i >= 0; i-- {
		if e := c.errs[i]; e.code == code && e.msg == msg {
			C.tpt_status_free(st)
			return e.err
		}
	}
	err := statusError(st)
	if e, ok := err.(*Error); ok && (e.Code == CodeInvalidArgument || e.Code == CodeState) {
		e.Message = runTrainOpsNames.Replace(e.Message)
	}
	return err
}

// GANOptions choose between tensorpack's GAN trainers, for Trainer.SetGAN
// (tpt_gan_options). The zero value (or nil) is GANTrainer with the train
// ops "g_op" and "d_op".
type GANOptions struct {
	// Separate makes SeparateGANTrainer: each run_step is a hooked run of
	// the discriminator's op when the global step is a multiple of DPeriod,
	// then one of the generator's when the global step (as it is by then)
	// is a multiple of GPeriod; a run_step may thus make two hooked runs,
	// each with a batch of its own. Without it, GANTrainer: every run_step
	// is one hooked run of the generator's op then the discriminator's,
	// from one forward pass.
	Separate bool
	// DPeriod and GPeriod are SeparateGANTrainer's periods, >= 1; 0 means 1.
	// One of them must be 1. Without Separate they must be 0 or 1.
	DPeriod, GPeriod int64
	// GOp and DOp are the names of the generator's and the discriminator's
	// train ops; "" means "g_op" and "d_op". They must differ.
	GOp, DOp string
	// Towers, if not nil, makes tensorpack's MultiGPUGANTrainer: SetGAN is
	// then SetTowers with these options, every tower takes its own batch,
	// and each op minimises its cost averaged over the towers. The
	// strategy must be StrategyReplicated or StrategyParameterServer
	// (StrategyAsync is an *Error of CodeUnsupported). nil means one tower,
	// the simple trainer.
	Towers *TowersOptions
}

// ganFieldNames spells the fields of tpt_gan_options that the library's
// messages name as GANOptions does.
var ganFieldNames = strings.NewReplacer(
	"options->g_op", "GANOptions.GOp",
	"options->d_op", "GANOptions.DOp",
	"(g_op '", "(GANOptions.GOp '",
	", d_op '", ", GANOptions.DOp '",
	"d_period and g_period", "GANOptions.DPeriod and GPeriod",
	"options->towers->n_towers", "GANOptions.Towers.Towers",
	"options->towers->devices", "GANOptions.Towers.Devices",
	"options->towers->intra_op_threads", "GANOptions.Towers.IntraOpThreads",
	"options->towers->bucket_bytes", "GANOptions.Towers.BucketBytes",
	"intra_op_threads is", "GANOptions.Towers.IntraOpThreads is",
	"options->towers", "GANOptions.Towers",
)

// cGANOptions returns the C options of o, whose op names and towers options
// live in C memory until the returned function frees them.
func cGANOptions(o *GANOptions, who string) (C.tpt_gan_options, func(), error) {
	fail := func(msg string) (C.tpt_gan_options, func(), error) {
		return C.tpt_gan_options{}, nil, &Error{Code: CodeInvalidArgument, Message: who + ": GANOptions." + msg}
	}
	dp, gp := o.DPeriod, o.GPeriod
	for _, p := range []struct {
		name string
		v    *int64
	}{{"DPeriod", &dp}, {"GPeriod", &gp}} {
		switch v := *p.v; {
		case v < 0:
			return fail(p.name + " is " + strconv.FormatInt(v, 10) + ": it must be >= 1 (0: 1)")
		case v > 1 && !o.Separate:
			return fail(p.name + " is " + strconv.FormatInt(v, 10) +
				" but Separate is false: the periods are SeparateGANTrainer's (set Separate)")
		case v == 0:
			*p.v = 1
		}
	}
	for _, f := range []struct{ what, s string }{{"GOp", o.GOp}, {"DOp", o.DOp}} {
		if err := noNUL(who, "GANOptions."+f.what, f.s); err != nil {
			return C.tpt_gan_options{}, nil, err
		}
	}
	copts := defaultGANOptions()
	copts.separate = cBool(o.Separate)
	copts.d_period = C.int64_t(dp)
	copts.g_period = C.int64_t(gp)
	towersFree := func() {}
	if o.Towers != nil {
		tw, twFree, err := cTowersOptions(o.Towers, who)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Message = strings.Replace(e.Message, who+": TowersOptions.", who+": GANOptions.Towers.", 1)
			}
			return C.tpt_gan_options{}, nil, err
		}
		// C memory (cgo's C.malloc does not return nil): copts, Go memory
		// passed to C, may hold C pointers only.
		p := (*C.tpt_towers_options)(C.malloc(C.size_t(unsafe.Sizeof(tw))))
		*p = tw
		copts.towers = p
		towersFree = func() {
			C.free(unsafe.Pointer(p))
			twFree()
		}
	}
	var frees []unsafe.Pointer
	if o.GOp != "" {
		copts.g_op = C.CString(o.GOp)
		frees = append(frees, unsafe.Pointer(copts.g_op))
	}
	if o.DOp != "" {
		copts.d_op = C.CString(o.DOp)
		frees = append(frees, unsafe.Pointer(copts.d_op))
	}
	return copts, func() {
		for _, p := range frees {
			C.free(p)
		}
		towersFree()
	}, nil
}

// setTrainOpsNames spells the C functions and fields that the library's
// messages about SetTrainOps name as this package does.
var setTrainOpsNames = strings.NewReplacer(
	"(tpt_trainer_set_model or tpt_trainer_set_towers first)", "(Trainer.SetModel, Trainer.SetTowers or Trainer.SetGAN first)",
	"none: tpt_model_add_train_op", "none: Model.AddTrainOp",
)
