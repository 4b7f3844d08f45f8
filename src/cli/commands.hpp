// Sub-commands of the superpoint-rt executable. Each returns the process exit code: 0 success, 1 some inputs
// failed (each reported on stderr naming the input), 2 bad command-line arguments.
#pragma once

namespace superpoint_rt::cli {

int extract_main(int argc, char** argv);     // superpoint-rt extract IMAGE... --out DIR
int info_main(int argc, char** argv);        // superpoint-rt info
int quickstart_main(int argc, char** argv);  // superpoint-rt quickstart [IMAGE] [--out-dir DIR]
int serve_main(int argc, char** argv);       // superpoint-rt serve [--host H] [--port P] ... (src/server/)

}  // namespace superpoint_rt::cli
