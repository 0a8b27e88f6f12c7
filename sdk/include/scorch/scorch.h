/* scorch/scorch.h — everything a plugin needs, in one include. */
#ifndef SCORCH_SCORCH_H
#define SCORCH_SCORCH_H

#include "scorch/args.h"
#include "scorch/autograd.h"
#include "scorch/context.h"
#include "scorch/csv.h"
#include "scorch/device.h"
#include "scorch/dist.h"
#include "scorch/hooks.h"
#include "scorch/image.h"
#include "scorch/infer.h"
#include "scorch/init.h"
#include "scorch/job.h"
#include "scorch/metrics.h"
#include "scorch/nn.h"
#include "scorch/ops.h"
#include "scorch/optim.h"
#include "scorch/params.h"
#include "scorch/plugin.h"
#include "scorch/rng.h"
#include "scorch/schedule.h"
#include "scorch/serialize.h"
#include "scorch/status.h"
#include "scorch/summary.h"
#include "scorch/tensor.h"
#include "scorch/user_funcs.h"

#endif
