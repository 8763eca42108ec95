// Spawning children, waiting for them and running commands (ProcessSpawn) is what every
// process test needs: re-exported so a test target imports only TestSupport.
@_exported import ProcessSpawn
