#include "server/metrics.h"
