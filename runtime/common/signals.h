// Daemons handle SIGTERM/SIGINT by waiting for them on a dedicated thread (sigwait), never in
// an async signal handler. Call BlockTerminationSignals() first thing in main, before any
// thread starts, so every thread inherits the mask.
#pragma once

namespace skyrl {

void BlockTerminationSignals();
// Blocks until SIGTERM or SIGINT arrives; returns the signal number.
int WaitForTerminationSignal();

}  // namespace skyrl
