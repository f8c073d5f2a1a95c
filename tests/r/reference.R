# Evaluates cases.csv (tests/r/make_cases.py) with R's own functions and writes reference.csv.
#   Rscript tests/r/reference.R tests/r/cases.csv tests/r/reference.csv
# Tested with R 4.2.2 (Debian's r-base-core). wilcox.test's defaults throughout: exact while both
# samples (or the non-zero differences) number under 50 and nothing is tied, else normal with tie
# and continuity corrections.
args <- commandArgs(trailingOnly = TRUE)
cases <- read.csv(args[1], colClasses = "character")
num <- function(s) if (nchar(s)) as.numeric(strsplit(s, " ")[[1]]) else numeric(0)
param <- function(s, key) {
  kv <- strsplit(strsplit(s, " ")[[1]], "=")
  for (p in kv) if (p[1] == key) return(p[2])
  NA
}
f <- function(v) format(v, digits = 17, scientific = TRUE)
out <- data.frame(id = character(), kind = character(), values = character(),
                  stringsAsFactors = FALSE)
for (i in seq_len(nrow(cases))) {
  row <- cases[i, ]
  x <- num(row$x)
  y <- num(row$y)
  v <- switch(row$kind,
    mwu = {
      t <- suppressWarnings(wilcox.test(x, y))
      c(t$p.value, t$statistic)
    },
    wilcoxon = {
      # differences at the metrics' resolution: raw floats make 0.82 - 0.81 != 0.83 - 0.82
      d <- round(x - y, 12)
      if (all(d == 0)) c(NA, NA) else {
        t <- suppressWarnings(wilcox.test(d))
        raw <- suppressWarnings(wilcox.test(x, y, paired = TRUE))
        c(t$p.value, t$statistic, raw$p.value)
      }
    },
    adjust = c(p.adjust(x, "holm"), p.adjust(x, "BH")),
    power = {
      n <- as.numeric(param(row$params, "n"))
      kind <- param(row$params, "type")
      d <- power.t.test(n = n, sig.level = as.numeric(param(row$params, "alpha")),
                        power = as.numeric(param(row$params, "power")), type = kind,
                        strict = TRUE, tol = 1e-12)$delta
      ncp <- if (kind == "paired") d * sqrt(n) else d * sqrt(n / 2)
      c(d, ncp)
    },
    hl_paired = {
      t <- wilcox.test(x, conf.int = TRUE)
      c(t$estimate, t$conf.int, attr(t$conf.int, "conf.level"))
    },
    hl_shift = {
      t <- wilcox.test(x, y, conf.int = TRUE)
      c(t$estimate, t$conf.int, attr(t$conf.int, "conf.level"))
    })
  out[i, ] <- c(row$id, row$kind, paste(f(v), collapse = " "))
}
write.csv(out, args[2], row.names = FALSE)
