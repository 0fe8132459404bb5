// `linea bench <target>`: each target times linea against an anchor in the same run, so that a
// speed claim is a ratio measured on one machine at one time, and prints JSON lines.
#include <vector>

#include "tools/commands.h"

namespace linea::cli {

Command bench_command() {
  return {"bench", "time linea against bare OpenBLAS and plain loops (JSON lines)",
          [](const std::string& program, std::span<const std::string> args) {
            // A new target is a bench_<target>.cpp and one line here.
            static const std::vector<Command> targets = {
                bench_ops_target(),
                bench_train_target(),
                bench_attention_target(),
                bench_scan_target(),
                bench_decode_target(),
            };
            return dispatch({program, "target", targets}, args);
          }};
}

}  // namespace linea::cli
