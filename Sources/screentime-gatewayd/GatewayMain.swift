// The device gateway on its own: the development build's binary. The package ships the same
// command inside `screentime` (Sources/screentime), under this name.
import ArgumentParser
import GatewayDaemon

@main extension GatewayCommand {}
