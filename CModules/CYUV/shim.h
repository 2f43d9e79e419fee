#pragma once
// libyuv (Debian libyuv-dev): scaling and plane fills for the room composite (Sources/Egress).
#include <libyuv/scale.h>
#include <libyuv/planar_functions.h>
