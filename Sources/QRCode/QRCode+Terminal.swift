extension QRCode {
    /// The symbol as text for a terminal: each line shows two rows of modules with the
    /// half-block characters, light modules drawn as blocks.
    ///
    /// With `colors`, ANSI escapes paint blocks white on black, so it scans on a light or a
    /// dark terminal; without, it relies on a dark background (as `qrencode -t UTF8` does).
    public func terminalText(margin: Int = 2, colors: Bool) -> String {
        let range = -margin..<(self.size + margin)
        var lines: [String] = []
        for top in stride(from: range.lowerBound, to: range.upperBound, by: 2) {
            var line = colors ? "\u{1B}[97;40m" : ""
            for column in range {
                let upperLight = !self[top, column]
                let lowerLight = top + 1 < range.upperBound ? !self[top + 1, column] : false
                switch (upperLight, lowerLight) {
                case (true, true): line += "█"
                case (true, false): line += "▀"
                case (false, true): line += "▄"
                case (false, false): line += " "
                }
            }
            if colors { line += "\u{1B}[0m" }
            lines.append(line)
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
