// Package tptrain is the Go binding of tptrain, a C-ABI library that brings
// tensorpack's Trainer to LibTorch.
//
// Each file is named after the C API's module header it wraps
// (include/tptrain/<module>.h), and a module's second file after it too
// (<module>_<part>.go): common (versions, errors), runtime (features,
// threads, seeds), tensor (also memory sharing, devices and DLPack), op (any
// ATen operator by name), image (grids of images, PNG files), callback
// (callbacks, wrappers, monitors) with callback_catalogue (the built-in
// callbacks: savers, schedules, early stopping, ...), tower (inside a tower
// function), model (models, variables, TorchScript, train ops, Restore),
// layer (layers, losses and metrics), optimizer, dataflow, input (input
// sources), strategy (the options of towers, distributed jobs and the GAN
// trainers), inference, trainer (the loop, Resume) with trainer_context (the
// Context that run_step and callbacks receive), launch (TrainConfig). The
// rest is plumbing: handle.go, defaults.go (the C _INIT macros) and the
// trampoline files (the Go functions the library calls back).
//
// # Errors
//
// Every fallible function returns an error. An error reported by the library
// is an *Error carrying the library's Code and message; use errors.As to read
// it, or errors.Is against the sentinels (ErrInvalidArgument, ErrBackend, ...)
// to test the code only:
//
//	if errors.Is(err, tptrain.ErrBackend) { ... }
//
// The C library keeps no thread-local error state, so no call needs
// runtime.LockOSThread.
//
// # Training
//
// A Trainer runs the epoch/step loop of tensorpack: a run_step function
// (SetRunStep) is called StepsPerEpoch times per epoch, and callbacks
// (NewCallback, AddCallback, AddMonitor) receive the loop's events. Each Go
// function given to the library receives a *Context: the counters, hooked
// steps, outputs and scalars, as seen from inside the loop. Every function
// returns an error:
//
//   - nil goes on;
//   - Stop(reason), a *StopError, ends training gracefully: AFTER_TRAIN runs,
//     Run returns nil and StopReason returns reason;
//   - any other error ends training: AFTER_TRAIN runs and Run returns that
//     same error value, so errors.Is, errors.As and == work on it.
//
// A panic never unwinds through the C library: it fails training like an
// error, AFTER_TRAIN runs, and Run then panics again with the same value.
// Run calls every function on the goroutine that called it; RequestStop may
// be called from any goroutine. A function must not call runtime.Goexit (so
// no t.FailNow in a test's callback).
//
// The Go functions cross into C as runtime/cgo.Handle values (no Go pointer
// is kept in C memory); the library releases each exactly once: when it is
// replaced, when its Trainer (or an unused Callback) is closed, or at once if
// the call that took it fails.
//
// # Models
//
// A Model (NewModel) is tensorpack's ModelDesc: an input signature and a
// tower function that builds the cost from the step's inputs with Tower
// methods (Variable, FC, Conv2D, BatchNorm, ...), package functions (MaxPool,
// SoftmaxCrossEntropy, Accuracy, ...) and OpCall (any ATen operator).
// Trainer.SetModel turns a Trainer into tensorpack's SimpleTrainer, fed by an
// Input (InputFromTensors, InputFromFeed); Trainer.SetTowers into one of its
// multi-GPU trainers (replicated, parameter server, async) whose towers run
// the tower function at the same time. Tower functions may run on
// several threads at once and must be safe for that; their errors and panics
// follow the rules above: Run, Build and Infer return a tower function's
// error unchanged, and panic again with its panic's value.
//
// Trainer.SetDistributed (or TrainConfig.Distributed), before SetModel or
// SetTowers, makes the process one rank of a distributed job, tensorpack's
// HorovodTrainer on LibTorch's c10d (Gloo over TCP): every rank trains its
// towers on its share of the input and the gradients are summed over every
// tower of every rank before each update, so N processes train as one
// process with N towers would. Rank 0 is the chief: it alone keeps the log
// directory and runs chief-only callbacks, and its variables reach every
// rank before the first step. The zero DistributedOptions takes everything
// from torchrun's environment variables: start the processes with
// tools/tptrain-run (tptrain-run -n 4 ./train ...) or torchrun.
//
// A trainer of your own, for what is not single-cost optimisation, keeps the
// loop, callbacks, monitors and checkpoints and changes run_step. A TrainOp
// (Model.AddTrainOp) is tensorpack's opt.minimize(cost, var_list): an output
// of the tower function minimised over the trainable variables under a
// scope, by an optimizer of its own (by default a copy of the model's).
// After SetModel, a run_step (SetRunStep) runs ops by name:
// Context.RunTrainOps("d_op") is one hooked step (tensorpack's
// hooked_sess.run: BEFORE_RUN and AFTER_RUN callbacks, the global step, the
// tower's outputs published), Context.RunTrainOpsRaw one without hooks
// (sess.run); each takes a batch and runs the tower function once for all
// the ops it names. Trainer.SetGAN is tensorpack's GANTrainer, or with
// GANOptions.Separate its SeparateGANTrainer, made of the ops "g_op" and
// "d_op" (as GANModelDesc makes them when the model lacks them: "g_loss"
// over "gen/", "d_loss" over "discrim/"). Each op's optimizer state is saved
// in checkpoints, so a resume is exact. Trainer.SetTrainOps makes the
// named ops every step without a run_step of your own. The simple trainer,
// the replicated and parameter-server strategies and distributed jobs run
// train ops (with towers each op's gradients are averaged over them), so
// GANOptions.Towers makes tensorpack's MultiGPUGANTrainer; the async
// strategy runs none.
//
// # Resources
//
// Values that own a C handle (*Tensor, *Trainer, *Callback, *Model,
// *Optimizer, *Input) have a Close method. Close is idempotent; call it (or defer it) as soon as the value is
// no longer needed.
// A finalizer releases a handle that was never closed, but only as a safety
// net: the garbage collector does not see the memory LibTorch holds.
//
// # Building
//
// The package links the C library through pkg-config (package "tptrain").
// Against a build tree use the uninstalled .pc file:
//
//	PKG_CONFIG_PATH=$BUILD/meson-uninstalled LD_LIBRARY_PATH=$BUILD go test ./...
package tptrain
