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
config.substitutions.append(("%examples", os.path.join(config.source_root, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%tokenizers", os.path.join(config.source_root, "tests", "fixtures", "tokenizers")))
config.substitutions.append(("%fixtures", os.path.join(config.source_root, "tests", "golden", "fixtures")))
# FileCheck, not and count come from llvm-14's tools directory.
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "")])
