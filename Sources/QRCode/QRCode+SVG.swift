extension QRCode {
    /// The symbol as an SVG document: one path of dark runs on a white square, `scale`
    /// pixels per module for the nominal size (it scales freely).
    public func svg(scale: Int = 8, margin: Int = QRCode.standardMargin) -> String {
        let side = self.size + 2 * margin
        var path = ""
        for row in 0..<self.size {
            var column = 0
            while column < self.size {
                guard self[row, column] else { column += 1; continue }
                let start = column
                while column < self.size && self[row, column] { column += 1 }
                let run = column - start
                path += "M\(start + margin) \(row + margin)h\(run)v1h-\(run)z"
            }
        }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="\(side * scale)" height="\(side * scale)" \
            viewBox="0 0 \(side) \(side)" shape-rendering="crispEdges">
            <rect width="\(side)" height="\(side)" fill="#ffffff"/>
            <path fill="#000000" d="\(path)"/>
            </svg>

            """
    }
}
