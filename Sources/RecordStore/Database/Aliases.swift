import StoreAPI

/// GRDB has a `Record` class too; in this module, a record is always the store's.
typealias Record = StoreAPI.Record
