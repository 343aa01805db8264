# lit configuration: every .agt file under tests/lit with RUN: lines is a test.
# %ag is the aliasguard CLI, %FileCheck LLVM's FileCheck, %S/%s/%t as usual.
import os
import lit.formats

config.name = "aliasguard"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".agt", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ag_binary_dir, "tests", "lit-out")
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.substitutions.append(("%ag", config.aliasguard))
config.substitutions.append(("%FileCheck", config.filecheck))
# %bench-alloc is the allocator benchmark (bench/alloc.c): its model traces
config.substitutions.append(("%bench-alloc", os.path.join(config.ag_binary_dir, "alloc")))
config.substitutions.append(("%examples", os.path.join(config.ag_source_dir, "examples")))
config.environment["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "")
config.environment["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "")
# %onnx-encode turns an ONNX model written as protobuf text (.textproto) into
# a binary model, so tests keep their ONNX inputs readable and reviewable.
config.substitutions.append(("%onnx-encode",
    "protoc --encode=onnx.ModelProto -I/usr/include/onnx /usr/include/onnx/onnx.proto"))
