import Foundation
#if canImport(Darwin)
#else
import AsyncHTTPClient
import NIOCore
#endif

/// The one HTTP request the kit makes outside its connection to the home server: a JSON
/// POST to the wake relay, trusted by the system's CAs. URLSession on Apple's platforms;
/// elsewhere async-http-client, because Linux's URLSession (FoundationNetworking) would
/// bring libcurl into every program that links the kit.
enum RelayHTTP {
    static func post(_ url: URL, body: Data) async throws -> (status: Int, body: Data) {
        #if canImport(Darwin)
        var request = URLRequest(url: url, timeoutInterval: 20)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = body
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        #else
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
        let data = try await response.body.collect(upTo: 64 * 1024)
        return (Int(response.status.code), Data(data.readableBytesView))
        #endif
    }
}
