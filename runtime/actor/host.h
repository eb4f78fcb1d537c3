// The actor host: the main() of an actor's process. It constructs one actor of a registered
// class and serves skyrl.v1.ActorService for it until SIGTERM.
//
//   skyrl-actor-host --class NAME [--init-args BYTES | --init-args-file F] [--actor-id ID] [--port 0]
//       [--bind 127.0.0.1] [--port-file F] [--token-file F] [--max-concurrency 1]
//       [--message-bytes 256Mi] [--max-call-bytes 4Gi]
// Exit codes: 0 after SIGTERM, 2 bad flags or unknown class, 3 the constructor failed (its
// message is the last log line), 1 cannot serve.
#pragma once

namespace skyrl {

int RunActorHost(int argc, char** argv);

// Does ahead of RunActorHost what needs none of its arguments (gRPC's start-up: its threads,
// pollers and resolvers), for a process that waits for its arguments: the fork server's spare.
// RunActorHost then finds it done. Idempotent.
void PrepareActorHost();

}  // namespace skyrl
