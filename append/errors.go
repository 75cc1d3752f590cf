package appendif
