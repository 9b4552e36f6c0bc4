"""What every part of the store uses: errors, file IO (local disk and object stores), data types and
table options (`CoreOptions`: each default once), partition paths, binary rows, key hash and key order,
grouping without a loop per row."""
