"""What results become: CCSDS `oem` files (the command line's other formats: ``cli/writers``)."""
