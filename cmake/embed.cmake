# Turns a text data file into a C translation unit defining
#   const char SYM[]; const unsigned long SYM_len;
# Usage: cmake -DIN=file -DOUT=file.c -DSYM=name -P embed.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* Generated from ${IN} by cmake/embed.cmake; do not edit. */\n"
     "extern const char ${SYM}[];\nextern const unsigned long ${SYM}_len;\n"
     "const char ${SYM}[] = {\n${body}0x00};\nconst unsigned long ${SYM}_len = ${len};\n")
