// A trainer's state as a checkpoint (base/checkpoint_file.hpp holds the
// format). Trainer::resume_from and auto-resume apply one (loop/checkpoint.cpp).
#pragma once

#include "base/checkpoint_file.hpp"

namespace tpt {

class Trainer;

// The trainer's whole state, between two run_steps (TPT_ERR_STATE inside one).
// Its tensors share storage with the live ones (no copy): encode it before
// training goes on.
Checkpoint take_checkpoint(Trainer &trainer);

}  // namespace tpt
