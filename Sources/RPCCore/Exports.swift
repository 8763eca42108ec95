// The wire's JSON (values, the parser of untrusted input, the writer, the decoder) is a
// module of its own; everything that speaks the wire sees it through RPCCore.
@_exported import WireJSON
