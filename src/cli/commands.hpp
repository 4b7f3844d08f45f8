// Sub-commands of the superpoint-rt executable. Each returns the process exit code: 0 success, 1 some inputs
// failed (each reported on stderr naming the input), 2 bad command-line arguments.
#pragma once

namespace superpoint_rt::cli {

int bench_main(int argc, char** argv);         // superpoint-rt bench [--threads 1,2] ... (src/cli/bench.cpp)
int colmap_main(int argc, char** argv);        // superpoint-rt colmap --features F.h5 ... -o DB (src/cli/colmap.cpp)
int extract_main(int argc, char** argv);       // superpoint-rt extract IMAGE|FOLDER... --out DIR | --output F.h5
int info_main(int argc, char** argv);          // superpoint-rt info
int match_main(int argc, char** argv);         // superpoint-rt match --features F.h5 --pairs P.txt -o M.h5
int merge_main(int argc, char** argv);         // superpoint-rt merge A.h5 B.h5... --output ALL.h5 (src/cli/merge.cpp)
int pairs_main(int argc, char** argv);         // superpoint-rt pairs --exhaustive|--sequential N ... -o pairs.txt
int params_main(int argc, char** argv);        // superpoint-rt params [--markdown] (src/cli/args.cpp)
int plot_matches_main(int argc, char** argv);  // superpoint-rt plot-matches A B ... -o PAIR.png (plot_matches.cpp)
int quickstart_main(int argc, char** argv);    // superpoint-rt quickstart [IMAGE] [--out-dir DIR]
int serve_main(int argc, char** argv);         // superpoint-rt serve [--host H] [--port P] ... (src/server/)

}  // namespace superpoint_rt::cli
