# size.awk — instructions per function of an LLVM module (dcc emit --stage
# llvm), each against its budget: 2500 for the skinny matmul kernels, 600
# for the other kernels; the host flow (disc_main) is not counted.
/^define/ {
    f = $0
    sub(/^[^@]*@/, "", f)
    sub(/\(.*/, "", f)
    n = 0
    next
}
/^}/ {
    if (f == "disc_main")
        next
    budget = f ~ /^disc_skinny/ ? 2500 : 600
    if (n <= budget)
        print f ": within " budget " instructions"
    else
        print f ": " n " instructions, over " budget
    next
}
/^  [^ ]/ && !/^  ;/ { n++ }
