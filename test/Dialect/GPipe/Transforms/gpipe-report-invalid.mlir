// gpipe-report needs stages and a valid format and output.
// RUN: gpipe-opt %s -split-input-file -gpipe-report -verify-diagnostics -o /dev/null
// RUN: not gpipe-opt %s -split-input-file -gpipe-report=format=yaml -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not gpipe-opt %s -split-input-file -gpipe-compile -gpipe-report=output=%t/missing/dir/report.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=OUTPUT

// FORMAT: error: invalid report format 'yaml': expected text or json
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
