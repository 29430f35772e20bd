package tptrain

// The C options structs as their _INIT macros make them: every default a Go
// option's zero value stands for comes from the header, never a copy.

/*
#include <tptrain.h>

#define TPTGO_INIT(type, macro) \
  static type tptgo_init_##type(void) { type o = macro; return o; }
TPTGO_INIT(tpt_trainer_options, TPT_TRAINER_OPTIONS_INIT)
TPTGO_INIT(tpt_towers_options, TPT_TOWERS_OPTIONS_INIT)
TPTGO_INIT(tpt_layer_options, TPT_LAYER_OPTIONS_INIT)
TPTGO_INIT(tpt_variable_options, TPT_VARIABLE_OPTIONS_INIT)
TPTGO_INIT(tpt_stat_monitor_options, TPT_STAT_MONITOR_OPTIONS_INIT)
TPTGO_INIT(tpt_early_stopping_options, TPT_EARLY_STOPPING_OPTIONS_INIT)
TPTGO_INIT(tpt_model_saver_options, TPT_MODEL_SAVER_OPTIONS_INIT)
TPTGO_INIT(tpt_restore_options, TPT_RESTORE_OPTIONS_INIT)
TPTGO_INIT(tpt_predictor_options, TPT_PREDICTOR_OPTIONS_INIT)
TPTGO_INIT(tpt_augmentor, TPT_AUGMENTOR_INIT)
TPTGO_INIT(tpt_image_grid_options, TPT_IMAGE_GRID_OPTIONS_INIT)
TPTGO_INIT(tpt_parallel_map_options, TPT_PARALLEL_MAP_OPTIONS_INIT)
TPTGO_INIT(tpt_input_options, TPT_INPUT_OPTIONS_INIT)
TPTGO_INIT(tpt_distributed_options, TPT_DISTRIBUTED_OPTIONS_INIT)
TPTGO_INIT(tpt_gan_options, TPT_GAN_OPTIONS_INIT)
*/
import "C"

func defaultTrainerOptions() C.tpt_trainer_options { return C.tptgo_init_tpt_trainer_options() }
func defaultTowersOptions() C.tpt_towers_options   { return C.tptgo_init_tpt_towers_options() }
func defaultLayerOptions() C.tpt_layer_options     { return C.tptgo_init_tpt_layer_options() }
func defaultVariableOptions() C.tpt_variable_options {
	return C.tptgo_init_tpt_variable_options()
}
func defaultStatMonitorOptions() C.tpt_stat_monitor_options {
	return C.tptgo_init_tpt_stat_monitor_options()
}
func defaultEarlyStoppingOptions() C.tpt_early_stopping_options {
	return C.tptgo_init_tpt_early_stopping_options()
}
func defaultModelSaverOptions() C.tpt_model_saver_options {
	return C.tptgo_init_tpt_model_saver_options()
}
func defaultRestoreOptions() C.tpt_restore_options { return C.tptgo_init_tpt_restore_options() }
func defaultAugmentor() C.tpt_augmentor            { return C.tptgo_init_tpt_augmentor() }
func defaultPredictorOptions() C.tpt_predictor_options {
	return C.tptgo_init_tpt_predictor_options()
}
func defaultGridOptions() C.tpt_image_grid_options { return C.tptgo_init_tpt_image_grid_options() }
func defaultParallelMapOptions() C.tpt_parallel_map_options {
	return C.tptgo_init_tpt_parallel_map_options()
}
func defaultInputOptions() C.tpt_input_options { return C.tptgo_init_tpt_input_options() }
func defaultDistributedOptions() C.tpt_distributed_options {
	return C.tptgo_init_tpt_distributed_options()
}
func defaultGANOptions() C.tpt_gan_options { return C.tptgo_init_tpt_gan_options() }
