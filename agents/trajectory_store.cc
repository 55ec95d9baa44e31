#include "agents/trajectory_store.h"
