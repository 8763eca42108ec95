import Foundation
import ScreenTimeKit
import Synchronization
import WakeTestSupport

/// The phones of a test, by APNs token: what iOS does with a push that reaches one (hands
/// its payload to the app's `didReceiveRemoteNotification`, here the kit's
/// `receiveRemoteNotification`). A push to a phone whose app is not open is dropped, as a
/// background push to a closed app is.
final class Phones: Sendable {
    private let apps = Mutex<[String: ScreenTimeClient]>([:])

    /// `kit` is the app open on the phone with `token`.
    func open(_ kit: ScreenTimeClient, on token: Data) {
        let hex = token.map { String(format: "%02x", $0) }.joined()
        self.apps.withLock { $0[hex] = kit }
    }

    /// For ``TestAPNs``'s `onDelivery`.
    func deliver(_ delivery: TestAPNs.Delivery) {
        guard let app = self.apps.withLock({ $0[delivery.token] }),
              let payload = try? JSONSerialization.jsonObject(with: Data(delivery.push.payload.utf8)) as? [String: Any] else { return }
        let userInfo = Dictionary(uniqueKeysWithValues: payload.map { (AnyHashable($0.key), $0.value) })
        app.notifications.receiveRemoteNotification(userInfo)
    }
}
