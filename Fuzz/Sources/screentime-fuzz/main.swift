import Foundation

// libFuzzer's own `main` is not the one that runs: SwiftPM links this module's entry point
// as the program's, so the program hands control to libFuzzer itself, with its arguments
// (a corpus directory, -max_total_time=…, crash files to replay).
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    WireFuzz.run(UnsafeBufferPointer(start: data, count: size))
    return 0
})
