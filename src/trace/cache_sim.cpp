#include "trace/cache_sim.h"
