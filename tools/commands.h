#pragma once
// The subcommands of `linea`. Each lives in its own file and is listed once in commands.cpp.
#include <span>

#include "tools/command.h"

namespace linea::cli {

Command train_command();      // train_command.cpp
Command linearize_command();  // linearize_command.cpp
Command eval_command();       // eval_command.cpp
Command generate_command();   // generate_command.cpp
Command tokenizer_command();  // tokenizer_command.cpp
Command gradcheck_command();  // gradcheck_command.cpp
Command bench_command();      // bench.cpp
Command plot_command();       // plot_command.cpp
Command graph_command();      // graph_command.cpp
Command paper_command();      // paper_command.cpp

// The table `linea` dispatches on, in the order `linea --help` lists it.
CommandTable linea_commands();

// Targets of `linea bench`; each is its own bench_<target>.cpp.
Command bench_ops_target();        // bench_ops.cpp
Command bench_train_target();      // bench_train.cpp
Command bench_attention_target();  // bench_attention.cpp
Command bench_scan_target();       // bench_scan.cpp
Command bench_decode_target();     // bench_decode.cpp

}  // namespace linea::cli
