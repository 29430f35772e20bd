#!/bin/sh
# Builds and runs the examples in C, Rust and Go against the build tree and
# checks what they print (TAP). Needs TPT_BUILD_ROOT and TPT_SOURCE_ROOT.
set -u
b=$TPT_BUILD_ROOT s=$TPT_SOURCE_ROOT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$b${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "TAP version 13"
n=0
# check NAME EXPECTED-TEXT COMMAND...
check() {
  name=$1 want=$2; shift 2
  n=$((n+1))
  if "$@" >"$tmp/out" 2>&1 && grep -q -- "$want" "$tmp/out"; then
    echo "ok $n - $name"
  else
    echo "not ok $n - $name (wanted '$want')"; tail -n 25 "$tmp/out" | sed 's/^/#   /'
  fi
}
converged="stopped: converged: standard error"
check "c/hello" "least squares fit: y = 3.02" "$b/examples/hello"
check "c/monte_carlo" "$converged" "$b/examples/monte_carlo" "$tmp/mc_c"
check "c/monte_carlo stats.json" "global_step" cat "$tmp/mc_c/stats.json"
check "c/mlp_regression" "held-out MSE after 10 epochs" "$b/examples/mlp_regression" "$tmp/mlp_c"
check "c/cnn_classifier" "test accuracy: " "$b/examples/cnn_classifier" "$tmp/cnn_c"
# Fashion-MNIST trains for minutes: only asked for its usage here (the same
# text in the three languages, --towers included).
fm_help="--towers N  train on N replicated CPU towers"
check "c/fashion_mnist --help" "$fm_help" "$b/examples/fashion_mnist" --help
fm_device='--device D  train on device D ("cuda:0"; default the CPU)'
check "c/fashion_mnist --help: --device" "$fm_device" "$b/examples/fashion_mnist" --help
# ... and as 2 ranks of a job started by the launcher, for 0 epochs: the
# rendezvous, the config's distributed field and the ranks' exits.
fm_data=/usr/share/datasets/fashion-mnist
if [ -r "$fm_data/train-images-idx3-ubyte.gz" ] || [ -r "$fm_data/train-images-idx3-ubyte" ]; then
  check "c/fashion_mnist --dist, 2 ranks by tptrain-run, 0 epochs" "\[rank 0\] .*nothing to train" \
    "$b/tools/tptrain-run" -n 2 "$b/examples/fashion_mnist" --dist "$tmp/fm_dist" "$fm_data" 0
  # --device: its tower on that device (here the CPU, through the towers' config), 0 epochs.
  check "c/fashion_mnist --device cpu, 0 epochs" "training on 1 replicated cpu tower, a batch of 128" \
    "$b/examples/fashion_mnist" --device cpu "$tmp/fm_device" "$fm_data" 0
fi
# The DCGAN (the gan-example test trains the C one longer): the usage, and
# 3 steps whose losses the Rust and Go twins must print exactly (the same
# network, data, noise and seed).
gan_help="--steps S   S steps per epoch"
gan_line=""
check "c/gan --help" "$gan_help" "$b/examples/gan" --help
if [ -r "$fm_data/train-images-idx3-ubyte.gz" ] || [ -r "$fm_data/train-images-idx3-ubyte" ]; then
  check "c/gan, 3 steps" "after 3 steps: g_loss" "$b/examples/gan" --steps 3 "$tmp/gan_c" "$fm_data" 1
  gan_line=$(grep -o "after 3 steps: g_loss [0-9.]*, d_loss [0-9.]*" "$tmp/out")
fi
# The programs whose [doc] parts the docs pages show (tests/docs/check_snippets.py).
snippet_trainer="stopped after 250 steps: enough"
snippet_model="training accuracy 0.9"
snippet_dataflow="a batch of 2, last square 81"
snippet_callbacks="stopped after epoch 3 (validation_cost < 1e-4) at learning_rate 0.1"
snippet_custom_trainer="global_step 40: a fits 3.00 x + 2.00, b fits -1.00 x + 0.50"
snippet_efficient_dataflow="16 batches of 64, sum of squares 357389824, last 1046529"
snippet_towers="40 steps of 2 towers: y = 3.00 x + 2.00"
snippet_checkpoints="resumed: global_step 16 to 32"
# The distributed snippet as 2 ranks of a job started by the launcher, on a
# port of this run's own.
snippet_distributed="\[rank 0\] rank 0 of 2, 40 steps: y = 3.00 x + 2.00"
dist_port=$((20000 + $$ % 20000))
check "c/snippets/trainer_loop" "$snippet_trainer" "$b/examples/snippet_trainer_loop"
check "c/snippets/model_train" "$snippet_model" "$b/examples/snippet_model_train"
check "c/snippets/dataflow_pipeline" "$snippet_dataflow" "$b/examples/snippet_dataflow_pipeline"
check "c/snippets/callbacks" "$snippet_callbacks" "$b/examples/snippet_callbacks"
check "c/snippets/custom_trainer" "$snippet_custom_trainer" "$b/examples/snippet_custom_trainer"
check "c/snippets/efficient_dataflow" "$snippet_efficient_dataflow" "$b/examples/snippet_efficient_dataflow"
check "c/snippets/towers" "$snippet_towers" "$b/examples/snippet_towers"
check "c/snippets/distributed, 2 ranks by tptrain-run" "$snippet_distributed" \
  "$b/tools/tptrain-run" -n 2 --master-port "$dist_port" "$b/examples/snippet_distributed"
check "c/snippets/checkpoints" "$snippet_checkpoints" "$b/examples/snippet_checkpoints" "$tmp/ckpt_c"
# Issue 34's program, as a new user coming from PyTorch Lightning writes it
# (two moons; examples/*/two_moons*), in each language: the first run stops
# early, the second trains nothing and says why, and both predict the same
# classes from the best checkpoint.
moons_first="stopped after epoch [0-9]*: EarlyStopping: validation_accuracy has not risen above its best"
moons_again="Auto-resume: the run was stopped at epoch [0-9]* (global_step [0-9]*) by EarlyStopping"
two_moons() { # LANGUAGE COMMAND...
  lang=$1; shift
  check "$lang/two_moons, first run: stopped early" "$moons_first" "$@" "$tmp/moons_$lang"
  predicted=$(grep -o "predicted classes from .*" "$tmp/out")
  check "$lang/two_moons, second run: nothing trained, and why" "$moons_again" "$@" "$tmp/moons_$lang"
  cp "$tmp/out" "$tmp/moons_again_$lang"
  check "$lang/two_moons, second run: the same prediction (${predicted:-none})" "the same" \
    same "${predicted:-no first prediction}" "$tmp/moons_again_$lang"
}
same() { grep -qF -- "$1" "$2" && echo "the same"; }
two_moons c "$b/examples/two_moons"
# Their length next to the Lightning program's 74 lines (the goal: Rust
# within 1.3x, Go within 2x).
lines() { wc -l < "$1" | tr -d ' '; }
echo "# two_moons: C $(lines "$s/examples/c/two_moons.c") lines, Rust $(lines "$s/examples/rust/src/bin/two_moons.rs")" \
  "(at most 96), Go $(lines "$s/examples/go/two_moons/main.go") (at most 148); the Lightning program: 74"
within() { [ "$(lines "$1")" -le "$2" ] && echo "within $2 lines"; }
check "rust/two_moons is within 1.3x the Lightning program's 74 lines" "within 96 lines" within "$s/examples/rust/src/bin/two_moons.rs" 96
check "go/two_moons is within 2x the Lightning program's 74 lines" "within 148 lines" within "$s/examples/go/two_moons/main.go" 148
if command -v cargo >/dev/null; then
  r() { (cd "$s/examples/rust" && TPTRAIN_LIB_DIR=$b CARGO_TARGET_DIR=$b/cargo-target cargo run --offline -q --bin "$@"); }
  check "rust/hello" "least squares fit: y = 3.02" r hello
  check "rust/monte_carlo" "$converged" r monte_carlo "$tmp/mc_rust"
  check "rust/mlp_regression" "final cost (MSE over" r mlp_regression
  check "rust/cnn_classifier" "held-out accuracy" r cnn_classifier
  check "rust/fashion_mnist --help (built, not trained)" "$fm_help" r fashion_mnist -- --help
  check "rust/fashion_mnist --help: --device" "$fm_device" r fashion_mnist -- --help
  check "rust/gan --help" "$gan_help" r gan -- --help
  [ -n "$gan_line" ] && check "rust/gan, 3 steps, the C program's losses" "$gan_line" r gan -- --steps 3 "$tmp/gan_rust" "$fm_data" 1
  check "rust/snippets/trainer_loop" "$snippet_trainer" r snippet_trainer_loop
  check "rust/snippets/model_train" "$snippet_model" r snippet_model_train
  check "rust/snippets/dataflow_pipeline" "$snippet_dataflow" r snippet_dataflow_pipeline
  check "rust/snippets/callbacks" "$snippet_callbacks" r snippet_callbacks
  check "rust/snippets/custom_trainer" "$snippet_custom_trainer" r snippet_custom_trainer
  check "rust/snippets/efficient_dataflow" "$snippet_efficient_dataflow" r snippet_efficient_dataflow
  check "rust/snippets/towers" "$snippet_towers" r snippet_towers
  # built, then run as 2 ranks by the launcher
  rdist() { (cd "$s/examples/rust" && TPTRAIN_LIB_DIR=$b CARGO_TARGET_DIR=$b/cargo-target cargo build --offline -q --bin "$1") &&
            "$b/tools/tptrain-run" -n 2 --master-port $((dist_port + 1)) "$b/cargo-target/debug/$1"; }
  check "rust/snippets/distributed, 2 ranks by tptrain-run" "$snippet_distributed" rdist snippet_distributed
  check "rust/snippets/checkpoints" "$snippet_checkpoints" r snippet_checkpoints "$tmp/ckpt_rust"
  two_moons rust r two_moons --
fi
if command -v go >/dev/null; then
  g() { (cd "$s/examples/go" && GOFLAGS=-mod=mod GOPROXY=off GOCACHE=${GOCACHE:-$b/go-cache} \
         PKG_CONFIG_PATH=$b/meson-uninstalled go run "$@"); }
  check "go/hello" "least squares fit: y = 3.02" g ./hello
  check "go/monte_carlo" "$converged" g ./monte_carlo "$tmp/mc_go"
  check "go/mlp_regression" "final cost (MSE over" g ./mlp_regression
  check "go/cnn_classifier" "held-out accuracy" g ./cnn_classifier
  check "go/fashion_mnist --help (built, not trained)" "$fm_help" g ./fashion_mnist --help
  check "go/fashion_mnist --help: --device" "$fm_device" g ./fashion_mnist --help
  check "go/gan --help" "$gan_help" g ./gan --help
  [ -n "$gan_line" ] && check "go/gan, 3 steps, the C program's losses" "$gan_line" g ./gan --steps 3 "$tmp/gan_go" "$fm_data" 1
  check "go/snippets/trainer_loop" "$snippet_trainer" g ./snippets/trainer_loop
  check "go/snippets/model_train" "$snippet_model" g ./snippets/model_train
  check "go/snippets/dataflow_pipeline" "$snippet_dataflow" g ./snippets/dataflow_pipeline
  check "go/snippets/callbacks" "$snippet_callbacks" g ./snippets/callbacks
  check "go/snippets/custom_trainer" "$snippet_custom_trainer" g ./snippets/custom_trainer
  check "go/snippets/efficient_dataflow" "$snippet_efficient_dataflow" g ./snippets/efficient_dataflow
  check "go/snippets/towers" "$snippet_towers" g ./snippets/towers
  # built, then run as 2 ranks by the launcher
  gdist() { (cd "$s/examples/go" && GOFLAGS=-mod=mod GOPROXY=off GOCACHE=${GOCACHE:-$b/go-cache} \
             PKG_CONFIG_PATH=$b/meson-uninstalled go build -o "$tmp/$1" "./snippets/$1") &&
            "$b/tools/tptrain-run" -n 2 --master-port $((dist_port + 2)) "$tmp/$1"; }
  check "go/snippets/distributed, 2 ranks by tptrain-run" "$snippet_distributed" gdist distributed
  check "go/snippets/checkpoints" "$snippet_checkpoints" g ./snippets/checkpoints "$tmp/ckpt_go"
  two_moons go g ./two_moons
fi
echo "1..$n"
