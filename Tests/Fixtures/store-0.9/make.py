#!/usr/bin/env python3
"""Makes store.sqlite as screentime-stored 0.9 laid it out (the change log numbered through
SQLite's AUTOINCREMENT, zones rewritten at each record change), for the test that the
store's later layout migrates it (Tests/StoreTests/LayoutMigrationTests.swift).

    make.py /path/to/0.9/screentime-stored

writes store.sqlite and tokens.json here: a family with a zone of three usage records, one
deleted, the zone's and the family's change tokens taken then, and the log's counter then
moved past its newest entry, as a restore or a purge of the whole log leaves it.
"""
import json, os, shutil, socket, sqlite3, struct, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
work = tempfile.mkdtemp()
os.makedirs(work + "/state")
store = subprocess.Popen([sys.argv[1], "--runtime-dir", work, "--state-dir", work + "/state", "--log-target", "stderr", "--log-level", "warning"])
while not os.path.exists(work + "/store.sock"):
    time.sleep(0.05)
connection = socket.socket(socket.AF_UNIX)
connection.connect(work + "/store.sock")
ids = iter(range(1, 1000))

def call(method, params):
    body = json.dumps({"id": next(ids), "method": method, "params": params}).encode()
    connection.sendall(struct.pack(">I", len(body)) + body)
    length = struct.unpack(">I", connection.recv(4, socket.MSG_WAITALL))[0]
    reply = json.loads(connection.recv(length, socket.MSG_WAITALL))
    if "error" in reply:
        raise SystemExit(reply["error"])
    return reply["result"]

call("store.createFamily", {"family": "smith"})
call("store.createZone", {"family": "smith", "zone": "ChildMonitoring-emma"})
saves = [{"recordType": "UsageRecord", "recordName": "u%d" % i, "fields": {
    "logicalID": "org.khan", "deviceID": "emma-ipad", "category": "learning", "totalSeconds": 600,
    "sessionStart": "2026-10-0%dT16:00:00Z" % (i + 1), "sessionEnd": "2026-10-0%dT16:10:00Z" % (i + 1)}} for i in range(3)]
call("store.modify", {"family": "smith", "zone": "ChildMonitoring-emma", "saves": saves})
call("store.modify", {"family": "smith", "zone": "ChildMonitoring-emma", "deletes": [{"recordName": "u2"}]})
tokens = {
    "zone": call("store.zoneChanges", {"family": "smith", "zone": "ChildMonitoring-emma"})["token"],
    "database": call("store.databaseChanges", {"family": "smith"})["token"],
}
connection.close()
store.terminate()
store.wait()
database = sqlite3.connect(work + "/state/store.sqlite")
database.execute("UPDATE sqlite_sequence SET seq = 1000000 WHERE name = 'changes'")
database.commit()
database.execute("PRAGMA journal_mode=DELETE")
database.close()
shutil.copy(work + "/state/store.sqlite", here + "/store.sqlite")
with open(here + "/tokens.json", "w") as out:
    json.dump(tokens, out, indent=2)
    out.write("\n")
shutil.rmtree(work)
