#include "trace/prefix_cache.h"
