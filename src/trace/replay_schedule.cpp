#include "trace/replay_schedule.h"
