# lit configuration for minfer: every .ir and .test file under tests/lit is a test.
import os
import lit.formats

config.name = "minfer"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.minferc), "..", "tests", "lit-out")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "Inputs"]

config.substitutions.append(("%minferc", config.minferc))
config.substitutions.append(("%builddir", os.path.dirname(os.path.dirname(config.minferc))))
config.substitutions.append(("%scripts", os.path.join(config.source_root, "scripts")))
config.substitutions.append(("%examples", os.path.join(config.source_root, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%tokenizers", os.path.join(config.source_root, "tests", "fixtures", "tokenizers")))
config.substitutions.append(("%fixtures", os.path.join(config.source_root, "tests", "golden", "fixtures")))
# The GPU test binary (its test names), when the build has one.
if os.path.exists(config.gpu_tests):
    config.available_features.add("gpu-tests")
    config.substitutions.append(("%gputests", config.gpu_tests))
# The CUDA toolkit's stub libcuda (link-time only: every call answers CUDA_ERROR_STUB_LIBRARY), when installed.
cuda_stub = os.path.join(config.cuda_library_dir, "stubs", "libcuda.so")
if os.path.exists(cuda_stub):
    config.available_features.add("cuda-stub")
    config.substitutions.append(("%cudastub", cuda_stub))
# FileCheck, not and count come from llvm-14's tools directory.
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "")])
