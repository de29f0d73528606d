# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "GPIPE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gpipe_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in",
                   "Unit", "Benchmark", "README.md", "Inputs"]
config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%examples", os.path.join(config.gpipe_src_root, "python-free-examples")))

import shutil
llvm_config.use_default_substitutions()
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.gpipe_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["gpipe-opt", "gpipe-translate", "gpipe-run", "gpipe-report", "gpipe-bench", "gpipe-capacity", "gpipe-tune", "gpipe-onnx-conformance", "embed_train", "gpipe-train-bundle", "resnet_model"], [config.gpipe_tools_dir])

# The tools built with the MPI transport and an mpirun to start them: the
# multi-process tests. CI runs as root, which Open MPI refuses unless told;
# two cores run up to four ranks.
if config.gpipe_have_mpi and shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", "mpirun --oversubscribe --allow-run-as-root"))
    if os.path.exists(os.path.join(config.gpipe_tools_dir, "gpipe-mpi-bench")):
        config.available_features.add("mpi-bench")

# ptxas, the CUDA toolkit's PTX assembler (no GPU needed): the generated PTX
# kernels are assembled where it is installed (PATH, or /usr/local/cuda/bin).
ptxas = shutil.which("ptxas")
if not ptxas and os.access("/usr/local/cuda/bin/ptxas", os.X_OK):
    ptxas = "/usr/local/cuda/bin/ptxas"
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# A machine with an NVIDIA GPU (the device tool's): tests of the no-GPU path
# do not apply there.
import shutil, subprocess
if shutil.which("nvidia-smi") and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0:
    config.available_features.add("cuda-gpu")
