#ifndef SCREENTIME_CPNG_SHIM_H
#define SCREENTIME_CPNG_SHIM_H

#include <png.h>

#endif
