// gpipe-report needs stages and a valid format and output.
// RUN: gpipe-opt %s -split-input-file -gpipe-report -verify-diagnostics -o /dev/null
// RUN: not gpipe-opt %s -split-input-file -gpipe-report=format=yaml -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not gpipe-opt %s -split-input-file -gpipe-compile -gpipe-report=output=%t/missing/dir/report.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=OUTPUT

// The simulation needs a sound machine, a profile of as many devices as
// the schedule, with every cost, and a trace file it can write.
// RUN: not gpipe-opt %s -split-input-file -gpipe-compile -gpipe-report="simulate=true device-gflops=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MACHINE
// RUN: not gpipe-opt %S/gpipe-report.mlir -gpipe-compile="num-stages=2" -gpipe-report="profile=%t.missing.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOPROFILE
// RUN: not gpipe-opt %S/gpipe-report.mlir -gpipe-compile="num-stages=2" -gpipe-report="profile=%s" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTJSON
// RUN: not gpipe-opt %S/gpipe-report.mlir -gpipe-compile="num-stages=2" -gpipe-report="profile=%S/Inputs/profile-k3.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not gpipe-opt %S/gpipe-report.mlir -gpipe-compile="num-stages=2" -gpipe-report="profile=%S/Inputs/profile-negative.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not gpipe-opt %S/gpipe-report.mlir -gpipe-compile="num-stages=2" -gpipe-report="profile=%S/Inputs/profile-weight-share.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SHARE
// RUN: not gpipe-opt %s -split-input-file -gpipe-compile -gpipe-report="trace=%t/missing/dir/trace.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRACE

// FORMAT: error: invalid report format 'yaml': expected text or json
// MACHINE: error: expects device-gflops > 0, link-gb-per-s > 0 and link-latency-us >= 0, got 0, 10 and 5
// NOPROFILE: error: 'gpipe.schedule' op cannot open profile '{{.*}}.missing.json': No such file or directory
// NOTJSON: error: 'gpipe.schedule' op cannot use profile '{{.*}}gpipe-report-invalid.mlir': not JSON: {{.*}}
// DEVICES: error: 'gpipe.schedule' op cannot use profile '{{.*}}profile-k3.json': the profile has 3 stage(s) but the schedule has 2: profile the same number of stages
// SHARE: error: 'gpipe.schedule' op cannot use profile '{{.*}}profile-weight-share.json': devices[0]: expected 'weight_share' between 0 and 1
// NEGATIVE: error: 'gpipe.schedule' op cannot use profile '{{.*}}profile-negative.json': devices[1]: expected a non-negative number 'forward_us_per_row'
// TRACE: error: cannot write the simulated trace to '{{.*}}missing/dir/trace.json': {{.*}}
// OUTPUT: error: cannot write the report to '{{.*}}missing/dir/report.txt': {{.*}}

// A model that was never compiled has nothing to report.
// expected-error @+1 {{'gpipe.model' op has no stages to report; run gpipe-compile first}}
gpipe.model @raw batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %a = gpipe.layer "a" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}
